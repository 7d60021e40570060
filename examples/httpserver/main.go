// Command httpserver is a web service that enqueues a job in the
// transaction of its own write: POST /signup stores a user and a welcome
// email job in one PostgreSQL transaction, so the email is sent if and only
// if the signup committed. A worker in the same process sends (here: logs)
// the email.
//
//	go run ./examples/httpserver
//	curl -d email=ada@example.com localhost:8080/signup
//
// The database is $SPOOL_DATABASE_URL, else the local server's postgres
// database; the program creates its users table and migrates Spool's
// schema.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/postgres"
)

// WelcomeEmail is the job a signup enqueues.
type WelcomeEmail struct {
	UserID int64  `json:"user_id"`
	To     string `json:"to"`
}

// Kind implements spool.JobArgs.
func (WelcomeEmail) Kind() string { return "welcome_email" }

func main() {
	addr := flag.String("addr", "localhost:8080", "address to listen on")
	flag.Parse()
	dsn := os.Getenv("SPOOL_DATABASE_URL")
	if dsn == "" {
		dsn = "postgres://postgres@localhost:5432/postgres?sslmode=disable"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, dsn, *addr); err != nil {
		log.Fatal(err)
	}
}

// run serves until ctx ends, then stops the server and the workers.
func run(ctx context.Context, dsn, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	app, err := start(ctx, pool, nil)
	if err != nil {
		return err
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: app}
	go func() {
		<-ctx.Done()
		srv.Shutdown(context.Background())
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return app.jobs.Stop(context.Background()) // running emails finish
}

// app is the web service: its database and its job client.
type app struct {
	*http.ServeMux
	pool *pgxpool.Pool
	jobs *spool.Client
}

// start creates the users table, migrates Spool's tables (in opts.Schema,
// "spool" by default), and starts the client that sends welcome emails.
func start(ctx context.Context, pool *pgxpool.Pool, opts *postgres.Options) (*app, error) {
	_, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS users (
		id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		email text NOT NULL UNIQUE,
		credits int NOT NULL DEFAULT 0)`)
	if err != nil {
		return nil, fmt.Errorf("create users table: %w", err)
	}
	be, err := postgres.New(pool, opts)
	if err != nil {
		return nil, err
	}
	if err := be.Migrate(ctx); err != nil {
		return nil, err
	}
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[WelcomeEmail]) error {
		slog.Info("sending welcome email", "to", job.Args.To, "user", job.Args.UserID)
		return nil // a real worker calls the mail service; an error retries
	}))
	jobs, err := spool.NewClient(be, &spool.Config{
		Workers: workers,
		Queues:  map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 10}},
	})
	if err != nil {
		return nil, err
	}
	if err := jobs.Start(ctx); err != nil {
		return nil, err
	}
	a := &app{ServeMux: http.NewServeMux(), pool: pool, jobs: jobs}
	a.HandleFunc("POST /signup", a.signup)
	return a, nil
}

// errUnknownReferrer fails a signup that names a referrer who is no user.
var errUnknownReferrer = errors.New("unknown referrer")

// signup stores the user, enqueues their welcome email and credits their
// referrer, all in one transaction: when any step fails, nothing of it
// stays, the email job included.
func (a *app) signup(w http.ResponseWriter, r *http.Request) {
	email, referrer := r.FormValue("email"), r.FormValue("referrer")
	if email == "" {
		http.Error(w, "email is required", http.StatusBadRequest)
		return
	}
	var id int64
	err := pgx.BeginFunc(r.Context(), a.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(r.Context(), `INSERT INTO users (email) VALUES ($1) RETURNING id`, email).Scan(&id)
		if err != nil {
			return err
		}
		if _, err := a.jobs.InsertTx(r.Context(), tx, WelcomeEmail{UserID: id, To: email}, nil); err != nil {
			return err
		}
		if referrer == "" {
			return nil
		}
		tag, err := tx.Exec(r.Context(), `UPDATE users SET credits = credits + 1 WHERE email = $1`, referrer)
		if err == nil && tag.RowsAffected() == 0 {
			err = errUnknownReferrer
		}
		return err
	})
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "23505": // unique_violation
		http.Error(w, "already signed up", http.StatusConflict)
	case errors.Is(err, errUnknownReferrer):
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
	case err != nil:
		slog.Error("signup failed", "error", err)
		http.Error(w, "signup failed", http.StatusInternalServerError)
	default:
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "user %d signed up\n", id)
	}
}
