package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
	"github.com/fxamacker/cbor/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrations embed.FS

// SchemaVersion is the newest database schema this build knows.
const SchemaVersion = 4

// ChunkSize is the largest piece of an artifact's bytes one row holds.
const ChunkSize = 1 << 20

// Options configure Open.
type Options struct {
	// MaxConns bounds the connection pool (0: pgxpool's default).
	MaxConns int32
	// ConnectTimeout bounds each connection attempt when the call's
	// context has no earlier deadline (0: 5 seconds).
	ConnectTimeout time.Duration
	// CollectEvery is the period of the background collection pass (see
	// Collect), the first one right after Open (0: DefaultCollectEvery;
	// negative: none).
	CollectEvery time.Duration
	// MaxSessionBytes limits a session's live bytes (its message and
	// trace rows, its artifacts' bytes and its head): a commit that would
	// take a session past it fails with too_large and writes nothing,
	// unless it only cuts back (truncates, deletes artifacts, drops
	// checkpoints). 0: no limit.
	MaxSessionBytes int64
}

// Store is a session.Store on a PostgreSQL database.
type Store struct {
	pool *pgxpool.Pool
	dsn  string // as given to Open
	url  string // without the password, for messages

	heads headCache
	waker waker
	coll  collector

	maxSession int64
}

var (
	_ session.Store = (*Store)(nil)

	encMode cbor.EncMode
	decMode cbor.DecMode
)

func init() {
	var err error
	encMode, err = cbor.EncOptions{Time: cbor.TimeRFC3339Nano}.EncMode()
	if err != nil {
		panic(err)
	}
	decMode, err = cbor.DecOptions{MaxNestedLevels: 64, MaxArrayElements: 1 << 27, MaxMapPairs: 1 << 27}.DecMode()
	if err != nil {
		panic(err)
	}
}

// IsURL reports whether store names a PostgreSQL database
// (postgres:// or postgresql://) rather than a folder.
func IsURL(store string) bool {
	return strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://")
}

// Open connects to the database at url, creates or migrates its schema, and
// returns the store. A database with a newer schema is schema_unsupported;
// a server that cannot be reached is unavailable.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, session.Wrap(session.CodeInvalidArgument, err, "pgstore.Open: bad database URL")
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	// Reads and commits run as one transaction each: no statement cache
	// is needed to be correct, and the default one is fine.
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, mapErr(err, "pgstore.Open %s", redact(url))
	}
	s := &Store{pool: pool, dsn: url, url: redact(url), maxSession: opts.MaxSessionBytes}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if opts.CollectEvery >= 0 {
		every := opts.CollectEvery
		if every == 0 {
			every = DefaultCollectEvery
		}
		s.startCollector(every)
	}
	return s, nil
}

// redact drops a password from a URL for messages.
func redact(url string) string {
	if cfg, err := pgconn.ParseConfig(url); err == nil {
		return fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
	}
	return "postgres://…"
}

// URL returns the store's database, without its password.
func (s *Store) URL() string { return s.url }

// DSN returns the connection string the store was opened with.
func (s *Store) DSN() string { return s.dsn }

type migration struct {
	version int
	sql     string
}

func loadMigrations() ([]migration, error) {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, n := range names {
		v, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(n, "migrations/"), "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: no version number", n)
		}
		b, err := migrations.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{v, string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// migrate brings the schema to SchemaVersion in one transaction, under an
// advisory lock so that hosts opening the same database at once migrate it
// once.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return session.Wrap(session.CodeInternal, err, "pgstore.Open: migrations")
	}
	return s.tx(ctx, "pgstore.Open: migrate", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(7310551)"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)"); err != nil {
			return err
		}
		var cur int
		err := tx.QueryRow(ctx, "SELECT version FROM schema_version").Scan(&cur)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if _, err := tx.Exec(ctx, "INSERT INTO schema_version VALUES (0)"); err != nil {
				return err
			}
		case err != nil:
			return err
		}
		if cur > SchemaVersion {
			return session.Errorf(session.CodeSchemaUnsupported, "pgstore.Open %s: the database's schema is version %d; this build knows up to %d", s.url, cur, SchemaVersion)
		}
		for _, m := range ms {
			if m.version <= cur {
				continue
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %d: %w", m.version, err)
			}
			cur = m.version
		}
		_, err = tx.Exec(ctx, "UPDATE schema_version SET version = $1", cur)
		return err
	})
}

// tx runs fn in a read-committed transaction and commits it.
func (s *Store) tx(ctx context.Context, op string, fn func(pgx.Tx) error) error {
	return s.txOpts(ctx, pgx.TxOptions{}, op, fn)
}

// read runs fn in a repeatable-read, read-only transaction, so every query
// in it sees one generation.
func (s *Store) read(ctx context.Context, op string, fn func(pgx.Tx) error) error {
	return s.txOpts(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, op, fn)
}

func (s *Store) txOpts(ctx context.Context, o pgx.TxOptions, op string, fn func(pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, o)
	if err != nil {
		return mapErr(err, "%s", op)
	}
	defer tx.Rollback(context.Background())
	if err := fn(tx); err != nil {
		return mapErr(err, "%s", op)
	}
	if err := tx.Commit(ctx); err != nil {
		return mapErr(err, "%s", op)
	}
	return nil
}

// mapErr gives err its session code: a coded error keeps its own; a server
// that cannot be reached (refused, reset, timed out, shutting down, or the
// call's deadline passed) is unavailable; a unique violation or a
// serialization failure is conflict; anything else is internal.
func mapErr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var se *session.Error
	if errors.As(err, &se) {
		return err
	}
	op := fmt.Sprintf(format, args...)
	if unreachable(err) {
		return session.Wrap(api.CodeUnavailable, err, "%s: the database cannot be reached", op)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505", "40001", "40P01":
			return session.Wrap(session.CodeConflict, err, "%s", op)
		case "54000":
			return session.Wrap(session.CodeTooLarge, err, "%s", op)
		}
	}
	return session.Wrap(session.CodeInternal, err, "%s", op)
}

// unreachable reports an error that says the server could not be reached or
// went away, as opposed to one it answered.
func unreachable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// 08: connection exception; 57P01-57P03: shutting down, crashed,
		// cannot connect now; 53300: too many connections.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || pe.Code == "53300"
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "unexpected EOF")
}

// Capabilities reports a durable, atomic, CAS-capable store with history.
// There is no single-writer lock: many processes write, and the
// compare-and-swap keeps them apart.
func (s *Store) Capabilities() session.Capabilities {
	return session.Capabilities{AtomicGenerations: true, DeltaCommits: true, CompareAndSwap: true, Durable: true, History: true}
}

// Close closes the connection pool. Later calls fail.
func (s *Store) Close() error {
	s.closeCollector()
	s.closeWaker()
	s.pool.Close()
	return nil
}
