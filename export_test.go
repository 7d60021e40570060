package spool

// SetSettleWaiting sets the hook settle calls when it starts waiting for a
// step record in flight (nil: none). Call it before any client starts.
func SetSettleWaiting(f func()) { settleWaiting = f }
