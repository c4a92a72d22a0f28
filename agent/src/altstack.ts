// Room for the crash handler on alternate signal stacks. Frida installs its signal handler
// with SA_ONSTACK, so on a thread that set up an alternate signal stack (sigaltstack) the
// handler — and our JS crash report inside it — runs there. Programs keep those stacks
// small: Rust's runtime gives every thread 8 KiB (for its stack-overflow message), far too
// little for a JS runtime, so the report overflowed it and a Rust program's crash was never
// reported (the process died silently). So a program's request for an alternate stack below
// MIN_BYTES is given a stack of about MIN_BYTES instead (mmap'd; untouched pages cost no memory),
// and ours is unmapped when the program disables or replaces it. The program's own buffer
// goes unused; it never learns the difference unless it asks sigaltstack what is installed.
//
// A thread without an alternate stack cannot report a stack overflow at all: the kernel
// finds no room for the signal frame and kills the process (SIGSEGV, no crash event). So
// the main thread, where unbounded recursion usually happens, gets one of ours when `main`
// starts (the agent is loaded before: processes are spawned suspended).
//
// Native (a CModule listener, no JS): sigaltstack runs at every thread start and exit, in
// forked children too, where the stale agent copy must not enter JS (forksafe.ts).

const ALTSTACK_C = `
#include <gum/guminterceptor.h>

typedef struct { void * sp; int flags; gsize size; } StackT;
typedef struct { StackT replacement; gpointer ours_before; gpointer hold; } Call;

extern void * mmap (void * addr, gsize length, int prot, int flags, int fd, long offset);
extern int munmap (void * addr, gsize length);
extern int sigaltstack_original (const StackT * ss, StackT * old);
extern gsize page_size;
extern gsize min_bytes;

#define SS_DISABLE 2
/* Ours are told apart by their size: min_bytes + 16 (a size no program picks; reading
 * memory near a program's stack is not safe: Rust puts a PROT_NONE guard page below it). */
#define OUR_SIZE (min_bytes + 16)
/* One page below the stack, the stack, and the page the 16 extra bytes reach into. */
#define MAPPING (min_bytes + 2 * page_size)

static gboolean ours (const StackT * s)
{
  return (s->flags & SS_DISABLE) == 0 && s->size == OUR_SIZE && ((gsize) s->sp % page_size) == 0;
}

void on_enter (GumInvocationContext * ic)
{
  Call * call = GUM_IC_GET_INVOCATION_DATA (ic, Call);
  StackT * ss = gum_invocation_context_get_nth_argument (ic, 0);
  StackT current;

  call->ours_before = NULL;
  call->hold = NULL;
  if (ss == NULL)
    return;
  /* Whatever the request, a stack of ours that it replaces is unmapped once it succeeded. */
  if (sigaltstack_original (NULL, &current) == 0 && ours (&current))
    call->ours_before = current.sp;
  if ((ss->flags & SS_DISABLE) != 0 || ss->size >= min_bytes)
    return;
  guint8 * mem = mmap (NULL, MAPPING, 3 /* rw */, 0x22 /* private anon */, -1, 0);
  if (mem == (guint8 *) -1)
    return;
  call->replacement.sp = mem + page_size;
  call->replacement.flags = ss->flags;
  call->replacement.size = OUR_SIZE;
  call->hold = mem;
  gum_invocation_context_replace_nth_argument (ic, 0, &call->replacement);
}

/* At main's entry (called from the agent, on the main thread): an alternate stack of ours
 * unless the thread has one. */
void on_main (void * unused)
{
  StackT current, ss;

  if (sigaltstack_original (NULL, &current) != 0 || (current.flags & SS_DISABLE) == 0)
    return;
  guint8 * mem = mmap (NULL, MAPPING, 3 /* rw */, 0x22 /* private anon */, -1, 0);
  if (mem == (guint8 *) -1)
    return;
  ss.sp = mem + page_size;
  ss.flags = 0;
  ss.size = OUR_SIZE;
  if (sigaltstack_original (&ss, NULL) != 0)
    munmap (mem, MAPPING);
}

void on_leave (GumInvocationContext * ic)
{
  Call * call = GUM_IC_GET_INVOCATION_DATA (ic, Call);
  gboolean ok = (int) (gsize) gum_invocation_context_get_return_value (ic) == 0;

  if (ok && call->ours_before != NULL)
    munmap ((guint8 *) call->ours_before - page_size, MAPPING);
  if (!ok && call->hold != NULL)
    munmap (call->hold, MAPPING);
}
`;

/** Alternate signal stacks smaller than this are replaced by one of this size. */
const MIN_BYTES = 512 * 1024;

/** The listener's CModule and cells live as long as the agent. */
const parts: object[] = [];

/** Give alternate signal stacks the program sets up from now on room for the crash report.
 * Returns why it could not, or null. */
export function enlargeSignalStacks(): string | null {
    const sigaltstack = Module.findGlobalExportByName("sigaltstack");
    const mmap = Module.findGlobalExportByName("mmap");
    const munmap = Module.findGlobalExportByName("munmap");
    if (sigaltstack === null || mmap === null || munmap === null) return "sigaltstack(), mmap() or munmap() not found";
    const pageSize = Memory.alloc(8);
    pageSize.writeU64(Process.pageSize);
    const minBytes = Memory.alloc(8);
    minBytes.writeU64(MIN_BYTES);
    // The listener calls sigaltstack itself to see what is installed; that nested call asks
    // for no new stack, so the listener lets it through unchanged.
    const cm = new CModule(ALTSTACK_C, { mmap, munmap, sigaltstack_original: sigaltstack, page_size: pageSize, min_bytes: minBytes });
    parts.push(cm, pageSize, minBytes);
    Interceptor.attach(sigaltstack, { onEnter: cm.on_enter, onLeave: cm.on_leave });
    module = cm;
    return null;
}

let module: CModule | null = null;

/**
 * Give the main thread an alternate stack when `main` starts. Only for a program that has not
 * reached `main` yet (spawned suspended, or just exec'd): hooking the `main` of a running
 * process (a re-attached agent, a fork) guards nothing.
 */
export function guardMainThread(): void {
    if (module === null) return;
    const main = Process.mainModule.findSymbolByName("main");
    if (main === null) return;
    // A JavaScript listener calling the native setup: a native (CModule) listener left on main
    // was seen to break a later re-attached agent's hooks, and detaching this one right after
    // main started raced with the program's fork (a forked child hung, 3 of 8 runs).
    const setup = new NativeFunction(module.on_main, "void", ["pointer"]);
    try {
        Interceptor.attach(main, function () {
            setup(ptr(0));
        });
    } catch (_) {
        // main not hookable: overflows on the main thread stay unreported
    }
}
