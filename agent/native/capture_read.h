/* Typed capture's reads of target memory (capture_walk.c): the fault-safe copy, the pages
 * known readable or unreadable, C strings. Static: compiled into the walk's one image. */
#ifndef STROBE_CAPTURE_READ_H
#define STROBE_CAPTURE_READ_H

#include "capture_types.h"

/* u64 strobe_safe_copy (dst, src, n) (System V: rdi, rsi, rdx): returns the bytes NOT
   copied. 32 bytes a step (two unaligned SSE loads, then the stores), then 8, then 1: a
   short `rep movsb` costs tens of ns to start, and a call copies ~25 small pointees. The
   registers are exact at every load (loads precede the stores and the pointer updates), so
   the agent's exception hook (capture.ts) resumes a fault: one in the wide steps at
   strobe_sc_slow (a `rep movsb` of what is left, byte-exact up to the unreadable page),
   one there at strobe_sc_rest (returns rcx), one in the byte step at strobe_sc_left
   (returns rdx). The fault points are strobe_sc_fault_*. */
__asm__ (
  ".text\n"
  ".globl strobe_safe_copy, strobe_sc_fault_w0, strobe_sc_fault_w1, strobe_sc_fault_q, strobe_sc_fault_b, strobe_sc_fault_rep, strobe_sc_slow, strobe_sc_rest, strobe_sc_left\n"
  "strobe_safe_copy:\n"
  "  cmp $32, %rdx\n"
  "  jb 2f\n"
  "1:\n"
  "strobe_sc_fault_w0:\n"
  "  movdqu (%rsi), %xmm0\n"
  "strobe_sc_fault_w1:\n"
  "  movdqu 16(%rsi), %xmm1\n"
  "  movdqu %xmm0, (%rdi)\n"
  "  movdqu %xmm1, 16(%rdi)\n"
  "  add $32, %rsi\n"
  "  add $32, %rdi\n"
  "  sub $32, %rdx\n"
  "  cmp $32, %rdx\n"
  "  jae 1b\n"
  "2:\n"
  "  cmp $8, %rdx\n"
  "  jb 3f\n"
  "strobe_sc_fault_q:\n"
  "  mov (%rsi), %rax\n"
  "  mov %rax, (%rdi)\n"
  "  add $8, %rsi\n"
  "  add $8, %rdi\n"
  "  sub $8, %rdx\n"
  "  jmp 2b\n"
  "3:\n"
  "  test %rdx, %rdx\n"
  "  jz 4f\n"
  "strobe_sc_fault_b:\n"
  "  movb (%rsi), %al\n"
  "  movb %al, (%rdi)\n"
  "  inc %rsi\n"
  "  inc %rdi\n"
  "  dec %rdx\n"
  "  jmp 3b\n"
  "4:\n"
  "  xor %eax, %eax\n"
  "  ret\n"
  "strobe_sc_left:\n"
  "  mov %rdx, %rax\n"
  "  ret\n"
  "strobe_sc_slow:\n"
  "  mov %rdx, %rcx\n"
  "strobe_sc_fault_rep:\n"
  "  rep movsb\n"
  "  xor %eax, %eax\n"
  "  ret\n"
  "strobe_sc_rest:\n"
  "  mov %rcx, %rax\n"
  "  ret\n");

extern u64 strobe_safe_copy (void * dst, const void * src, u64 n);

/* u64 strobe_safe_diff (src, kept, n) (rdi, rsi, rdx): where the n bytes at src first differ
   from those at kept: n when they do not; else the offset of the first differing 8-byte
   word (in the last n % 8 bytes: of the last 8-byte window, or of the byte when n < 8); ~0
   when src faults (the agent's exception hook
   resumes any load of src, strobe_sd_fault_*, at strobe_sd_fault). Comparing what a
   sub-walk copied last time with memory now writes nothing: an unchanged span travels as a
   reference, a changed one as its changed words (capture_walk.c cap_delta). 32 bytes a step
   while equal, then 8, then the last 8 again (1 at a time below 8). */
__asm__ (
  ".text\n"
  ".globl strobe_safe_diff, strobe_sd_fault_w0, strobe_sd_fault_w1, strobe_sd_fault_q, strobe_sd_fault_t, strobe_sd_fault_b, strobe_sd_fault\n"
  "strobe_safe_diff:\n"
  "  mov %rdx, %r8\n"
  "  cmp $32, %rdx\n"
  "  jb 2f\n"
  "1:\n"
  "strobe_sd_fault_w0:\n"
  "  movdqu (%rdi), %xmm0\n"
  "strobe_sd_fault_w1:\n"
  "  movdqu 16(%rdi), %xmm1\n"
  "  movdqu (%rsi), %xmm2\n"
  "  movdqu 16(%rsi), %xmm3\n"
  "  pcmpeqb %xmm2, %xmm0\n"
  "  pcmpeqb %xmm3, %xmm1\n"
  "  pand %xmm1, %xmm0\n"
  "  pmovmskb %xmm0, %eax\n"
  "  cmp $0xffff, %eax\n"
  "  jne 2f\n"
  "  add $32, %rdi\n"
  "  add $32, %rsi\n"
  "  sub $32, %rdx\n"
  "  cmp $32, %rdx\n"
  "  jae 1b\n"
  "2:\n"
  "  cmp $8, %rdx\n"
  "  jb 3f\n"
  "strobe_sd_fault_q:\n"
  "  mov (%rdi), %rax\n"
  "  cmp (%rsi), %rax\n"
  "  jne 5f\n"
  "  add $8, %rdi\n"
  "  add $8, %rsi\n"
  "  sub $8, %rdx\n"
  "  jmp 2b\n"
  "3:\n"
  "  test %rdx, %rdx\n"
  "  jz 4f\n"
  "  cmp $8, %r8\n"
  "  jb 6f\n"
  /* Fewer than 8 left of at least 8: the last 8 bytes, overlapping what was equal. */
  "  sub $8, %rdx\n"
  "  add %rdx, %rdi\n"
  "  add %rdx, %rsi\n"
  "strobe_sd_fault_t:\n"
  "  mov (%rdi), %rax\n"
  "  cmp (%rsi), %rax\n"
  "  je 4f\n"
  "  lea -8(%r8), %rax\n"
  "  ret\n"
  "6:\n"
  "strobe_sd_fault_b:\n"
  "  movb (%rdi), %al\n"
  "  cmpb (%rsi), %al\n"
  "  jne 5f\n"
  "  inc %rdi\n"
  "  inc %rsi\n"
  "  dec %rdx\n"
  "  jnz 6b\n"
  "4:\n"
  "  mov %r8, %rax\n"
  "  ret\n"
  "5:\n"
  "  mov %r8, %rax\n"
  "  sub %rdx, %rax\n"
  "  ret\n"
  "strobe_sd_fault:\n"
  "  mov $-1, %rax\n"
  "  ret\n");

extern u64 strobe_safe_diff (const void * src, const void * kept, u64 n);

/* CapDiff strobe_safe_diff_list (cmp, n, kept) (rdi, rsi, rdx): in rax the index of the first
   of the n comparisons at cmp (CapCmp: len bytes at src with those at kept + koff; a C
   string's, nul 1, also the byte at src + len with 0) that finds a difference, and in rdx
   the offset of the 16- or 32-byte step of that block where it did (0 below 16 bytes, or
   at the NUL), where cap_delta_block starts looking for the changed words; n when
   none does; ~0 when a src faults (the exception hook resumes any load of src,
   strobe_sl_fault_*, at strobe_sd_fault). A replayed sub-walk's whole span is
   compared in this one loop, no call per block: 32 bytes a step, then the last 16 and 8
   overlapping what was equal; below 8 two overlapping loads of 4 or 2, or one byte: no loop
   (lengths 1–7 are mostly short C strings, and were a byte loop's mispredicted exits). */
__asm__ (
  ".text\n"
  ".globl strobe_safe_diff_list, strobe_sl_fault_w0, strobe_sl_fault_w1, strobe_sl_fault_x, strobe_sl_fault_y, strobe_sl_fault_q, strobe_sl_fault_r, strobe_sl_fault_b, strobe_sl_fault_c, strobe_sl_fault_d, strobe_sl_fault_e, strobe_sl_fault_f, strobe_sl_fault_n\n"
  "strobe_safe_diff_list:\n"
  "  xor %eax, %eax\n"
  "  test %rsi, %rsi\n"
  "  jz 9f\n"
  "1:\n"
  "  mov (%rdi), %r8\n"            /* src */
  "  mov 8(%rdi), %ecx\n"          /* koff */
  "  lea (%rdx,%rcx), %r9\n"       /* kept + koff */
  "  movzwl 12(%rdi), %ecx\n"      /* len */
  "  cmp $16, %ecx\n"
  "  jb 5f\n"
  "  xor %r10d, %r10d\n"
  "  cmp $32, %ecx\n"
  "  jb 3f\n"
  "2:\n"
  "strobe_sl_fault_w0:\n"
  "  movdqu (%r8,%r10), %xmm0\n"
  "strobe_sl_fault_w1:\n"
  "  movdqu 16(%r8,%r10), %xmm1\n"
  "  movdqu (%r9,%r10), %xmm2\n"
  "  movdqu 16(%r9,%r10), %xmm3\n"
  "  pcmpeqb %xmm2, %xmm0\n"
  "  pcmpeqb %xmm3, %xmm1\n"
  "  pand %xmm1, %xmm0\n"
  "  pmovmskb %xmm0, %r11d\n"
  "  cmp $0xffff, %r11d\n"
  "  jne 10f\n"
  "  add $32, %r10\n"
  "  lea 32(%r10), %r11\n"
  "  cmp %rcx, %r11\n"
  "  jbe 2b\n"
  "  cmp %rcx, %r10\n"
  "  je 8f\n"
  "3:\n"                            /* 1 to 31 bytes left of at least 16: 16 from there (or from len - 16), and the last 16 */
  "  lea -16(%rcx), %r11\n"
  "  cmp %r11, %r10\n"
  "  cmova %r11, %r10\n"
  "strobe_sl_fault_x:\n"
  "  movdqu (%r8,%r10), %xmm0\n"
  "strobe_sl_fault_y:\n"
  "  movdqu -16(%r8,%rcx), %xmm1\n"
  "  movdqu (%r9,%r10), %xmm2\n"
  "  movdqu -16(%r9,%rcx), %xmm3\n"
  "  pcmpeqb %xmm2, %xmm0\n"
  "  pcmpeqb %xmm3, %xmm1\n"
  "  pand %xmm1, %xmm0\n"
  "  pmovmskb %xmm0, %r11d\n"
  "  cmp $0xffff, %r11d\n"
  "  jne 10f\n"
  "  jmp 8f\n"
  "5:\n"                            /* below 16: the first 8 and the last 8, or bytes */
  "  cmp $8, %ecx\n"
  "  jb 6f\n"
  "strobe_sl_fault_q:\n"
  "  mov (%r8), %r10\n"
  "strobe_sl_fault_r:\n"
  "  mov -8(%r8,%rcx), %r11\n"
  "  cmp (%r9), %r10\n"
  "  jne 11f\n"
  "  cmp -8(%r9,%rcx), %r11\n"
  "  jne 11f\n"
  "  jmp 8f\n"
  "6:\n"                            /* below 8: the first 4 and the last 4, or 2 and 2, or 1 */
  "  cmp $4, %ecx\n"
  "  jb 7f\n"
  "strobe_sl_fault_b:\n"
  "  mov (%r8), %r10d\n"
  "strobe_sl_fault_c:\n"
  "  mov -4(%r8,%rcx), %r11d\n"
  "  cmp (%r9), %r10d\n"
  "  jne 11f\n"
  "  cmp -4(%r9,%rcx), %r11d\n"
  "  jne 11f\n"
  "  jmp 8f\n"
  "7:\n"
  "  cmp $2, %ecx\n"
  "  jb 12f\n"
  "strobe_sl_fault_d:\n"
  "  movzwl (%r8), %r10d\n"
  "strobe_sl_fault_e:\n"
  "  movzwl -2(%r8,%rcx), %r11d\n"
  "  cmp (%r9), %r10w\n"
  "  jne 11f\n"
  "  cmp -2(%r9,%rcx), %r11w\n"
  "  jne 11f\n"
  "  jmp 8f\n"
  "12:\n"
  "  test %ecx, %ecx\n"
  "  jz 8f\n"
  "strobe_sl_fault_f:\n"
  "  movzbl (%r8), %r10d\n"
  "  cmp (%r9), %r10b\n"
  "  jne 11f\n"
  "8:\n"
  "  testb $1, 14(%rdi)\n"        /* a C string: its NUL at src + len too */
  "  jz 13f\n"
  "strobe_sl_fault_n:\n"
  "  cmpb $0, (%r8,%rcx)\n"
  "  jne 11f\n"
  "13:\n"
  "  add $16, %rdi\n"
  "  inc %rax\n"
  "  cmp %rsi, %rax\n"
  "  jb 1b\n"
  "9:\n"
  "  ret\n"
  "10:\n"                           /* a difference at or after byte r10 of the block */
  "  mov %r10, %rdx\n"
  "  ret\n"
  "11:\n"
  "  xor %edx, %edx\n"
  "  ret\n");

/* strobe_safe_diff_list_avx2: the same contract, 32-byte AVX2 loads (where the CPU and the
   kernel allow them: strobe_cpu_avx2, CaptureShared.avx2). Blocks of 32 bytes and more: 64
   bytes a step, then the last 32 bytes and the 32 before them overlapping what was equal;
   below 32 as strobe_safe_diff_list, whose instructions for small blocks are repeated here:
   sharing them would need a register for the caller's loop, and none is free (a fault
   resumes at strobe_sd_fault with no frame to restore one). The SQLite bench's spans are
   mostly kept structs of hundreds of bytes: the step loop held most of the comparison's
   samples. Every load of src is labelled (strobe_sa_fault_*); vzeroupper before each
   return. */
__asm__ (
  ".text\n"
  ".globl strobe_safe_diff_list_avx2, strobe_sa_fault_w0, strobe_sa_fault_w1, strobe_sa_fault_x, strobe_sa_fault_y, strobe_sa_fault_o, strobe_sa_fault_p, strobe_sa_fault_q, strobe_sa_fault_r, strobe_sa_fault_b, strobe_sa_fault_c, strobe_sa_fault_d, strobe_sa_fault_e, strobe_sa_fault_f, strobe_sa_fault_n\n"
  "strobe_safe_diff_list_avx2:\n"
  "  xor %eax, %eax\n"
  "  test %rsi, %rsi\n"
  "  jz 9f\n"
  "1:\n"
  "  mov (%rdi), %r8\n"            /* src */
  "  mov 8(%rdi), %ecx\n"          /* koff */
  "  lea (%rdx,%rcx), %r9\n"       /* kept + koff */
  "  movzwl 12(%rdi), %ecx\n"      /* len */
  "  xor %r10d, %r10d\n"
  "  cmp $32, %ecx\n"
  "  jb 4f\n"
  "  cmp $64, %ecx\n"
  "  jb 3f\n"
  "2:\n"
  "strobe_sa_fault_w0:\n"
  "  vmovdqu (%r8,%r10), %ymm0\n"
  "strobe_sa_fault_w1:\n"
  "  vmovdqu 32(%r8,%r10), %ymm1\n"
  "  vpcmpeqb (%r9,%r10), %ymm0, %ymm0\n"
  "  vpcmpeqb 32(%r9,%r10), %ymm1, %ymm1\n"
  "  vpand %ymm1, %ymm0, %ymm0\n"
  "  vpmovmskb %ymm0, %r11d\n"
  "  cmp $-1, %r11d\n"
  "  jne 10f\n"
  "  add $64, %r10\n"
  "  lea 64(%r10), %r11\n"
  "  cmp %rcx, %r11\n"
  "  jbe 2b\n"
  "  cmp %rcx, %r10\n"
  "  je 8f\n"
  "3:\n"                            /* 1 to 63 bytes left of at least 32: 32 from there (or from len - 32), and the last 32 */
  "  lea -32(%rcx), %r11\n"
  "  cmp %r11, %r10\n"
  "  cmova %r11, %r10\n"
  "strobe_sa_fault_x:\n"
  "  vmovdqu (%r8,%r10), %ymm0\n"
  "strobe_sa_fault_y:\n"
  "  vmovdqu -32(%r8,%rcx), %ymm1\n"
  "  vpcmpeqb (%r9,%r10), %ymm0, %ymm0\n"
  "  vpcmpeqb -32(%r9,%rcx), %ymm1, %ymm1\n"
  "  vpand %ymm1, %ymm0, %ymm0\n"
  "  vpmovmskb %ymm0, %r11d\n"
  "  cmp $-1, %r11d\n"
  "  jne 10f\n"
  "  jmp 8f\n"
  "4:\n"                            /* 16 to 31: the first 16 and the last 16 */
  "  cmp $16, %ecx\n"
  "  jb 5f\n"
  "strobe_sa_fault_o:\n"
  "  vmovdqu (%r8), %xmm0\n"
  "strobe_sa_fault_p:\n"
  "  vmovdqu -16(%r8,%rcx), %xmm1\n"
  "  vpcmpeqb (%r9), %xmm0, %xmm0\n"
  "  vpcmpeqb -16(%r9,%rcx), %xmm1, %xmm1\n"
  "  vpand %xmm1, %xmm0, %xmm0\n"
  "  vpmovmskb %xmm0, %r11d\n"
  "  cmp $0xffff, %r11d\n"
  "  jne 10f\n"
  "  jmp 8f\n"
  "5:\n"                            /* below 16: the first 8 and the last 8, or smaller */
  "  cmp $8, %ecx\n"
  "  jb 6f\n"
  "strobe_sa_fault_q:\n"
  "  mov (%r8), %r10\n"
  "strobe_sa_fault_r:\n"
  "  mov -8(%r8,%rcx), %r11\n"
  "  cmp (%r9), %r10\n"
  "  jne 11f\n"
  "  cmp -8(%r9,%rcx), %r11\n"
  "  jne 11f\n"
  "  jmp 8f\n"
  "6:\n"
  "  cmp $4, %ecx\n"
  "  jb 7f\n"
  "strobe_sa_fault_b:\n"
  "  mov (%r8), %r10d\n"
  "strobe_sa_fault_c:\n"
  "  mov -4(%r8,%rcx), %r11d\n"
  "  cmp (%r9), %r10d\n"
  "  jne 11f\n"
  "  cmp -4(%r9,%rcx), %r11d\n"
  "  jne 11f\n"
  "  jmp 8f\n"
  "7:\n"
  "  cmp $2, %ecx\n"
  "  jb 12f\n"
  "strobe_sa_fault_d:\n"
  "  movzwl (%r8), %r10d\n"
  "strobe_sa_fault_e:\n"
  "  movzwl -2(%r8,%rcx), %r11d\n"
  "  cmp (%r9), %r10w\n"
  "  jne 11f\n"
  "  cmp -2(%r9,%rcx), %r11w\n"
  "  jne 11f\n"
  "  jmp 8f\n"
  "12:\n"
  "  test %ecx, %ecx\n"
  "  jz 8f\n"
  "strobe_sa_fault_f:\n"
  "  movzbl (%r8), %r10d\n"
  "  cmp (%r9), %r10b\n"
  "  jne 11f\n"
  "8:\n"
  "  testb $1, 14(%rdi)\n"        /* a C string: its NUL at src + len too */
  "  jz 13f\n"
  "strobe_sa_fault_n:\n"
  "  cmpb $0, (%r8,%rcx)\n"
  "  jne 11f\n"
  "13:\n"
  "  add $16, %rdi\n"
  "  inc %rax\n"
  "  cmp %rsi, %rax\n"
  "  jb 1b\n"
  "9:\n"
  "  vzeroupper\n"
  "  ret\n"
  "10:\n"                           /* a difference at or after byte r10 of the block */
  "  mov %r10, %rdx\n"
  "  vzeroupper\n"
  "  ret\n"
  "11:\n"
  "  xor %edx, %edx\n"
  "  vzeroupper\n"
  "  ret\n");

/* 1 when AVX2 can be used: the CPU has it (CPUID 7.0 EBX bit 5) and the kernel saves the
   YMM registers (OSXSAVE, and XCR0's SSE and AVX state bits). */
__asm__ (
  ".text\n"
  ".globl strobe_cpu_avx2\n"
  "strobe_cpu_avx2:\n"
  "  push %rbx\n"
  "  xor %r8d, %r8d\n"
  "  mov $1, %eax\n"
  "  xor %ecx, %ecx\n"
  "  cpuid\n"
  "  and $0x18000000, %ecx\n"      /* OSXSAVE (27) and AVX (28) */
  "  cmp $0x18000000, %ecx\n"
  "  jne 1f\n"
  "  xor %ecx, %ecx\n"
  "  xgetbv\n"
  "  and $6, %eax\n"
  "  cmp $6, %eax\n"
  "  jne 1f\n"
  "  xor %eax, %eax\n"
  "  cpuid\n"
  "  cmp $7, %eax\n"
  "  jb 1f\n"
  "  mov $7, %eax\n"
  "  xor %ecx, %ecx\n"
  "  cpuid\n"
  "  shr $5, %ebx\n"
  "  and $1, %ebx\n"
  "  mov %ebx, %r8d\n"
  "1:\n"
  "  mov %r8d, %eax\n"
  "  pop %rbx\n"
  "  ret\n");

/* What strobe_safe_diff_list found (returned in rax:rdx): at, and when at < n, from: a byte
   of that block from which on the difference lies (the bytes before it compared equal). */
typedef struct { u64 at; u64 from; } CapDiff;
extern CapDiff strobe_safe_diff_list (const CapCmp * cmp, u64 n, const u8 * kept);
extern CapDiff strobe_safe_diff_list_avx2 (const CapCmp * cmp, u64 n, const u8 * kept);
extern u32 strobe_cpu_avx2 (void);

/* The comparison loop this CPU runs best (CaptureShared.avx2, set by capture.ts), unless the
   call must leave the upper halves of vector registers alone (sse_only: the AVX2 loop ends
   in vzeroupper). */
static inline CapDiff cap_diff_list (const CaptureShared * cs, u32 sse_only, const CapCmp * cmp, u64 n, const u8 * kept) {
  return cs->avx2 && !sse_only ? strobe_safe_diff_list_avx2 (cmp, n, kept) : strobe_safe_diff_list (cmp, n, kept);
}

static inline long sys6 (long n, long a, long b, long c, long d, long e, long f) {
  long ret;
  register long r10 __asm__ ("r10") = d;
  register long r8 __asm__ ("r8") = e;
  register long r9 __asm__ ("r9") = f;
  __asm__ volatile ("syscall" : "=a" (ret) : "a" (n), "D" (a), "S" (b), "d" (c), "r" (r10), "r" (r8), "r" (r9) : "rcx", "r11", "memory");
  return ret;
}

static inline u64 cap_ticks (void) {
  u32 lo, hi;
  __asm__ volatile ("rdtsc" : "=a" (lo), "=d" (hi));
  return ((u64) hi << 32) | lo;
}

static inline int cap_plausible (u64 p) {
  return p >= 0x10000 && p < 0x800000000000UL;
}

/* A page's slot in a table of 2^bits: hashed, as garbage pointers differ in high bits. */
static inline u32 cap_page_slot (u64 page, u32 bits) {
  return (u32) ((page * 0x9e3779b97f4a7c15UL) >> (64 - bits));
}

static inline int cap_page_known (CapScratch * s, u64 page) {
  if (page + 1 == s->trusted)
    return 1;
  const u64 * set = &s->pages[cap_page_slot (page, CAP_SETS_BITS) * CAP_WAYS];
  return set[0] == page + 1 || set[1] == page + 1 || set[2] == page + 1 || set[3] == page + 1;
}

static void cap_page_remember (CapScratch * s, u64 page) {
  if (cap_page_known (s, page))
    return;
  u32 at = cap_page_slot (page, CAP_SETS_BITS);
  s->pages[at * CAP_WAYS + (s->next_way[at]++ & (CAP_WAYS - 1))] = page + 1;
}

/* The time stamp counter, read once a walk (s->now 0 until then): a read costs ~10 ns
   here, and a call may meet several pages known unreadable. */
static inline u64 cap_now (CapScratch * s) {
  if (s->now == 0)
    s->now = cap_ticks ();
  return s->now;
}

typedef struct { void * base; u64 len; } CapIov;

/* Was the page of p found unreadable in the last CAP_BAD_TICKS? (Then cap_copy from p
   copies nothing: a walk from it can be skipped.) */
static inline int cap_known_bad (CapScratch * s, u64 p) {
  u64 page = p >> 12;
  u32 b = cap_page_slot (page, CAP_BAD_BITS);
  return s->bad[b] == page + 1 && cap_now (s) - s->bad_at[b] < CAP_BAD_TICKS;
}

/* Copy n (> 0) bytes from src to dst without faulting; returns the bytes copied (a read
   stops at the first page that cannot be read). A page not known readable is read with
   process_vm_readv on this process (EFAULT instead of a signal and Frida's exception
   dispatch) and remembered; one it refused is remembered for CAP_BAD_TICKS (read from the
   time stamp counter only then: a clock read costs more than the rest of a small walk). */
static u32 cap_copy (CapScratch * s, CaptureShared * cs, u8 * dst, u64 src, u32 n) {
  u64 first = src >> 12, last = (src + n - 1) >> 12, pg;
  int known = 1;
  for (pg = first; pg <= last && known; pg++)
    known = cap_page_known (s, pg);
  if (known || !cs->vm_readv)
    return n - (u32) strobe_safe_copy (dst, (const void *) src, n);
  u32 b = cap_page_slot (first, CAP_BAD_BITS);
  u64 now = cap_now (s);
  if (s->bad[b] == first + 1 && now - s->bad_at[b] < CAP_BAD_TICKS)
    return 0;
  cs->checked++;
  /* One remote element per page: a partial read stops at an element boundary (man
     process_vm_readv), so what precedes an unreadable page is still copied. */
  CapIov local, remote[CAP_IOV];
  long nr = 0;
  u64 at = src, end = src + n;
  while (at < end && nr < CAP_IOV) {
    u64 stop = ((at >> 12) + 1) << 12;
    if (stop > end)
      stop = end;
    remote[nr].base = (void *) at;
    remote[nr].len = stop - at;
    nr++;
    at = stop;
  }
  local.base = dst;
  local.len = at - src;
  long pid = sys6 (SYS_GETPID, 0, 0, 0, 0, 0, 0);
  long got = sys6 (SYS_PROCESS_VM_READV, pid, (long) &local, 1, (long) remote, nr, 0);
  if (got <= 0) {
    s->bad[b] = first + 1;
    s->bad_at[b] = now;
    return 0;
  }
  if ((u64) got > n)
    got = n;
  /* Every page a byte was read from is readable (protection is per page). */
  for (pg = first; pg <= ((src + (u64) got - 1) >> 12); pg++)
    cap_page_remember (s, pg);
  return (u32) got;
}

static inline u32 cap_hash (u64 p, u32 key) {
  return (u32) (((p >> 3) ^ (p >> 17) ^ ((u64) key * 0x9e3779b9u)) * 0x9e3779b1u);
}

/* The small table's entries of this walk into the big one, which the walk uses from now on. */
static void cap_grow (CapScratch * s) {
  for (u32 i = 0; i < CAP_SMALL; i++) {
    if (s->small[i].gen != s->gen)
      continue;
    u32 h = cap_hash (s->small[i].addr, s->small[i].key) & (CAP_TABLE - 1);
    while (s->seen[h].gen == s->gen)
      h = (h + 1) & (CAP_TABLE - 1);
    s->seen[h] = s->small[i];
    s->seen_data[h] = s->small_data[i];
  }
  s->big = 1;
}

/* The entry of (p, key) this walk; *fresh when it was not there. NULL: no room. */
static CapSeenData * cap_seen (CapScratch * s, u64 p, u32 key, int * fresh) {
  if (!s->big && s->visits >= CAP_SMALL / 2)
    cap_grow (s);
  CapSeen * table = s->big ? s->seen : s->small;
  CapSeenData * data = s->big ? s->seen_data : s->small_data;
  u32 mask = s->big ? CAP_TABLE - 1 : CAP_SMALL - 1;
  u32 h = cap_hash (p, key) & mask;
  for (;;) {
    CapSeen * e = &table[h];
    if (e->gen != s->gen) {
      if (s->visits >= CAP_VISITS)
        return 0;
      s->visits++;
      e->gen = s->gen;
      e->addr = p;
      e->key = key;
      CapSeenData * d = &data[h];
      d->depth = 0; d->want = 0; d->len = 0; d->data = 0;
      *fresh = 1;
      return d;
    }
    if (e->addr == p && e->key == key) {
      *fresh = 0;
      return &data[h];
    }
    h = (h + 1) & mask;
  }
}

/* The first NUL in p[0..n), or NULL: sixteen bytes a step (SSE2 compare and mask). */
typedef char cap_v16 __attribute__ ((vector_size (16)));
static u8 * cap_nul (u8 * p, u32 n) {
  const cap_v16 zero = { 0 };
  u32 i = 0;
  for (; i + 16 <= n; i += 16) {
    cap_v16 v;
    __builtin_memcpy (&v, p + i, 16);
    u32 m = (u32) __builtin_ia32_pmovmskb128 ((cap_v16) (v == zero));
    if (m != 0)
      return p + i + __builtin_ctz (m);
  }
  for (; i < n; i++)
    if (p[i] == 0)
      return p + i;
  return 0;
}

/* A payload block's header at h: the address copied from, then its meta (capture_c.ts). */
static inline void cap_header (u8 * h, u64 addr, u32 meta) {
  __builtin_memcpy (h, &addr, 8);
  __builtin_memcpy (h + 8, &meta, 4);
}

/* A C string at p into h (header included); returns the bytes used (0: none). Copied in
   growing chunks (hint bytes first: 64, or in a replay the length last time, NUL included,
   rounded to 16), none crossing a page (readable
   as a whole or not at all), until a NUL or CAP_STRING + 1 bytes. */
static u32 cap_string (CapScratch * s, CaptureShared * cs, u8 * h, u64 p, u32 hint) {
  u8 * d = h + 12;
  u32 got = 0, term = 0, step = hint;
  while (got <= CAP_STRING) {
    u64 at = p + got;
    u32 chunk = 4096 - (u32) (at & 4095);
    if (chunk > step)
      chunk = step;
    if (chunk > CAP_STRING + 1 - got)
      chunk = CAP_STRING + 1 - got;
    u32 c = cap_copy (s, cs, d + got, at, chunk);
    u8 * z = c > 0 ? cap_nul (d + got, c) : 0;
    if (z != 0) {
      got = (u32) (z - d);
      term = 1;
      break;
    }
    got += c;
    if (c < chunk)
      break;
    step *= 2;
  }
  if (got == 0 && !term)
    return 0;
  u32 meta = got | META_CSTRING | (term ? META_TERMINATED : 0);
  cap_header (h, p, meta);
  return 12 + (got > CAP_STRING ? CAP_STRING : got);
}


#endif
