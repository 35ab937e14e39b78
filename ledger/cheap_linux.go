//go:build linux && cgo

package ledger

/*
#include <malloc.h>
#include <stdlib.h>

// svc_bound_arenas caps glibc's malloc arenas at two unless
// MALLOC_ARENA_MAX says otherwise. It runs when the binary is loaded,
// before the Go runtime starts its threads: glibc fixes the arenas a
// thread uses at its first allocation.
__attribute__((constructor)) static void svc_bound_arenas(void) {
#ifdef M_ARENA_MAX
	if (getenv("MALLOC_ARENA_MAX") == NULL) {
		mallopt(M_ARENA_MAX, 2);
	}
#endif
}
*/
import "C"

// The C heap holds SQLite's page caches and compiled statements. glibc
// gives each thread that allocates under contention an arena of its own, up
// to eight per core, and a freed block returns only to its own arena; the
// Go runtime makes cgo calls on whichever of its threads is free, so each
// connection's memory ends up spread over every arena, each keeping
// megabytes no other can reuse, and svc's resident memory creeps up under
// steady load (docs/performance.md, "Memory under steady load"). The
// constructor above caps the arenas at two, where glibc is the C library.
