//go:build !unix

package ledger

import "os"

// tryLock takes no lock where flock is missing: one writer per database is
// then the operator's to keep (docs/operations.md).
func tryLock(*os.File) (held bool, err error) { return false, nil }
