/* Strobe benchmark driver (benches/cxx_nodes.rs): a word index over real text nobody here
 * wrote — the identifiers of the SQLite amalgamation (libsqlite3-sys's sqlite3.c, its path the
 * first argument) — kept in a std::map (ordered) and a std::unordered_map, then looked up one
 * identifier after another. Traced: the two lookups, each taking the whole container by
 * reference, so a typed trace prints its first 100 entries (serialize.ts readNodes; natively,
 * capture_walk.c cap_nodes).
 *
 * Usage: nodes_drv <sqlite3.c> [iterations=20000] [wait]
 * Each iteration makes one call of each lookup. After "ready" (and, with "wait", a line on
 * stdin) it runs the loop, timing only that part:
 *   "workload ns=T iterations=N checksum=C cpu_ns=U" (U: the thread's CPU time)
 * With "wait", it exits after one more line on stdin. */
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

extern "C" __attribute__((noinline)) int index_count(const std::map<std::string, int> &index, const std::string &word) {
    auto it = index.find(word);
    return it == index.end() ? 0 : it->second;
}

extern "C" __attribute__((noinline)) int hash_count(const std::unordered_map<std::string, int> &index, const std::string &word) {
    auto it = index.find(word);
    return it == index.end() ? 0 : it->second;
}

static long long clock_ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: nodes_drv <sqlite3.c> [iterations] [wait]\n");
        return 2;
    }
    int iterations = argc > 2 ? atoi(argv[2]) : 20000;
    int wait = argc > 3 && strcmp(argv[3], "wait") == 0;
    std::ifstream in(argv[1]);
    std::stringstream text;
    text << in.rdbuf();
    std::string all = text.str();
    // The first identifiers of the text, in order (a 2,000-word index).
    std::vector<std::string> words;
    std::map<std::string, int> index;
    std::unordered_map<std::string, int> hashed;
    for (size_t i = 0; i < all.size() && index.size() < 2000;) {
        if (isalpha((unsigned char)all[i]) || all[i] == '_') {
            size_t j = i;
            while (j < all.size() && (isalnum((unsigned char)all[j]) || all[j] == '_')) j++;
            std::string w = all.substr(i, j - i);
            index[w]++;
            hashed[w]++;
            words.push_back(w);
            i = j;
        } else {
            i++;
        }
    }
    char line[16];
    printf("ready\n");
    fflush(stdout);
    if (wait && fgets(line, sizeof line, stdin) == NULL) return 1;
    long long t0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    long long checksum = 0;
    for (int i = 0; i < iterations; i++) {
        const std::string &w = words[i % words.size()];
        checksum += index_count(index, w) + hash_count(hashed, w);
    }
    long long t1 = clock_ns(CLOCK_MONOTONIC), c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    printf("workload ns=%lld iterations=%d checksum=%lld cpu_ns=%lld\n", t1 - t0, iterations, checksum, c1 - c0);
    fflush(stdout);
    if (wait && fgets(line, sizeof line, stdin) == NULL) return 1;
    return 0;
}
