/* Strobe benchmark driver (benches/lua_real.rs): the Lua 5.4 interpreter (the sources bundled
 * in the lua-src crate, built -g -O2 as distributions build them) running table lookups.
 * Nobody here wrote the traced functions, each taking two struct pointers:
 * luaH_getshortstr(Table *, TString *) (a field read, `obj.count`) and
 * luaH_get(Table *, const TValue *) (a table or float key, `m[key]`, `m[2.5]`).
 *
 * Usage: lua_drv [iterations=20000] [wait]
 * Each iteration makes one luaH_getshortstr call and two luaH_get calls. After "ready" (and,
 * with "wait", a line on stdin) it runs the loop, timing only that part:
 *   "workload ns=T iterations=N checksum=C cpu_ns=U" (U: the thread's CPU time)
 * With "wait", it exits after one more line on stdin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "lauxlib.h"
#include "lua.h"
#include "lualib.h"

static const char *SETUP =
    "local obj = {name = 'widget', count = 2, weight = 1.5}\n"
    "local key = {}\n"
    "local m = {[key] = 7, [2.5] = 3}\n"
    "function work(n)\n"
    "  local s = 0\n"
    "  for i = 1, n do s = s + obj.count + m[key] + m[2.5] end\n"
    "  return s\n"
    "end\n";

static long long clock_ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    int iterations = argc > 1 ? atoi(argv[1]) : 20000;
    int wait = argc > 2 && strcmp(argv[2], "wait") == 0;
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    if (luaL_dostring(L, SETUP) != LUA_OK) {
        fprintf(stderr, "setup: %s\n", lua_tostring(L, -1));
        return 1;
    }
    char line[16];
    printf("ready\n");
    fflush(stdout);
    if (wait && fgets(line, sizeof line, stdin) == NULL) return 1;
    long long t0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    lua_getglobal(L, "work");
    lua_pushinteger(L, iterations);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
        fprintf(stderr, "work: %s\n", lua_tostring(L, -1));
        return 1;
    }
    long long t1 = clock_ns(CLOCK_MONOTONIC), c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    long long checksum = (long long)lua_tointeger(L, -1);
    lua_close(L);
    printf("workload ns=%lld iterations=%d checksum=%lld cpu_ns=%lld\n", t1 - t0, iterations, checksum, c1 - c0);
    fflush(stdout);
    /* The tracer reads its statistics before the process exits. */
    if (wait && fgets(line, sizeof line, stdin) == NULL) return 1;
    return 0;
}
