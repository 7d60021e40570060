package sqlite

// BusyWaits returns how many attempts at the write lock of b's writers
// found it held by another connection (the fair busy handler's).
func BusyWaits(b *Backend) int64 { return b.st.busyWaits.Load() }

// ClaimBlock is claimBlock.
var ClaimBlock = claimBlock
