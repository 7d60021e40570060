package mysql

import (
	"fmt"
	"log"
	"log/slog"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// driverLogger carries go-sql-driver/mysql's messages, which it writes to
// stderr through the standard log package unless given a logger, to the
// backend's logger, saying what each means.
type driverLogger struct{ l *slog.Logger }

// Print implements mysql.Logger.
func (d driverLogger) Print(v ...any) {
	msg := strings.TrimSpace(fmt.Sprint(v...))
	switch {
	case strings.Contains(msg, "closing bad idle connection"):
		// The pool's liveness check before reuse found the socket closed:
		// the driver drops it and the statement runs on a new connection.
		d.l.Info("spool mysql: discarded a pooled connection the server had closed while it was idle (a server restart, KILL CONNECTION, or wait_timeout); the statement ran on a new connection",
			"driver_message", msg)
	case strings.Contains(msg, "closing connection"):
		d.l.Info("spool mysql: a connection already broken could not be closed cleanly; it is discarded", "driver_message", msg)
	default:
		d.l.Warn("spool mysql: the MySQL driver reported a problem", "driver_message", msg)
	}
}

// withDriverLogger returns a copy of cfg whose driver messages go to logger,
// unless the caller set a logger of their own.
func withDriverLogger(cfg *mysql.Config, logger *slog.Logger) *mysql.Config {
	c := cfg.Clone()
	if c.Logger == nil || isDriverDefault(c.Logger) {
		c.Logger = driverLogger{logger}
	}
	return c
}

// isDriverDefault reports whether l is the driver's own stderr logger (the
// one its config constructors fill in).
func isDriverDefault(l mysql.Logger) bool {
	def, ok := mysql.NewConfig().Logger.(*log.Logger)
	got, ok2 := l.(*log.Logger)
	return ok && ok2 && def == got
}
