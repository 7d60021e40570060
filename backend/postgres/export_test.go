package postgres

// SetSettleParts sets the size of b's first part of a settling finish
// batch (firstSettlePart) and the rows a part settles (settlePartRows),
// so that a test cuts a small batch into parts.
func SetSettleParts(b *Backend, first, rows int) {
	b.settleFirst, b.settleRows = first, rows
}

// MaxNoticeIDs is maxNoticeIDs: an insert notification lists the jobs
// of its queue up to that many.
const MaxNoticeIDs = maxNoticeIDs
