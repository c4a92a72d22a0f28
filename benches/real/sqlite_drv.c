/* Strobe benchmark driver (benches/sqlite_real.rs): SQLite's own code (the amalgamation of
 * the libsqlite3-sys crate, built -g -O0) running a query workload. Nobody here wrote the
 * traced functions: sqlite3VdbeMemRelease(Mem *), sqlite3BtreeNext(BtCursor *, int) and
 * sqlite3BtreePayloadSize(BtCursor *) (returns a field of the cursor's struct).
 *
 * Usage: sqlite_drv [rows=2000] [queries=40] [wait]
 * Builds a table, then (after "ready" and a line on stdin with "wait") runs `queries` full
 * scans with a filter and an aggregate, timing only that part:
 *   "workload ns=T rows=R queries=Q checksum=C cpu_ns=U sys_ns=S faults=F" (U: the thread's
 *   CPU time, which a busy machine does not inflate; S: the part of it in the kernel, F:
 *   the thread's page faults, both from getrusage)
 * With "wait", it exits after one more line on stdin. */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include "sqlite3.h"

static long long clock_ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}
static long long now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
/* This thread's kernel time (ns) and page faults (minor and major), from getrusage. */
static void kernel_share(long long *sys_ns, long *faults) {
    struct rusage u;
    getrusage(RUSAGE_THREAD, &u);
    *sys_ns = (long long)u.ru_stime.tv_sec * 1000000000LL + u.ru_stime.tv_usec * 1000LL;
    *faults = u.ru_minflt + u.ru_majflt;
}

int main(int argc, char **argv) {
    int rows = argc > 1 ? atoi(argv[1]) : 2000;
    int queries = argc > 2 ? atoi(argv[2]) : 40;
    sqlite3 *db;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK) return 1;
    sqlite3_exec(db, "create table t(id integer primary key, name text, score int)", 0, 0, 0);
    sqlite3_exec(db, "begin", 0, 0, 0);
    sqlite3_stmt *ins;
    sqlite3_prepare_v2(db, "insert into t(name, score) values(?1, ?2)", -1, &ins, 0);
    for (int i = 0; i < rows; i++) {
        char name[32];
        snprintf(name, sizeof name, "name-%d", i);
        sqlite3_bind_text(ins, 1, name, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(ins, 2, (i * 7919) % 1000);
        sqlite3_step(ins);
        sqlite3_reset(ins);
    }
    sqlite3_finalize(ins);
    sqlite3_exec(db, "commit", 0, 0, 0);
    if (argc > 3 && strcmp(argv[3], "wait") == 0) {
        char line[16];
        printf("ready\n");
        fflush(stdout);
        if (fgets(line, sizeof line, stdin) == NULL) return 1;
    }
    sqlite3_stmt *q;
    sqlite3_prepare_v2(db, "select upper(name), score from t where score > ?1", -1, &q, 0);
    long long checksum = 0;
    long long s0, s1;
    long f0, f1;
    kernel_share(&s0, &f0);
    long long t0 = now_ns(), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (int k = 0; k < queries; k++) {
        sqlite3_bind_int(q, 1, k % 500);
        while (sqlite3_step(q) == SQLITE_ROW) checksum += sqlite3_column_int(q, 1) + sqlite3_column_bytes(q, 0);
        sqlite3_reset(q);
    }
    long long t1 = now_ns(), c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    kernel_share(&s1, &f1);
    sqlite3_finalize(q);
    sqlite3_close(db);
    printf("workload ns=%lld rows=%d queries=%d checksum=%lld cpu_ns=%lld sys_ns=%lld faults=%ld\n", t1 - t0, rows, queries, checksum, c1 - c0, s1 - s0, f1 - f0);
    fflush(stdout);
    if (argc > 3 && strcmp(argv[3], "wait") == 0) {
        /* The tracer reads its statistics before the process exits. */
        char line[16];
        if (fgets(line, sizeof line, stdin) == NULL) return 1;
    }
    return 0;
}
