package ledger

// SetCommitFault makes every commit run f first (nil: none).
func SetCommitFault(f func()) { commitFault = f }
