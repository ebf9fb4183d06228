// Package store keeps vouchers and redemptions in PostgreSQL, the source of truth. Its
// statements are guarded so the database alone refuses over-allocation.
//
// Lock order: a transaction that locks a voucher row and redemption rows locks the voucher row
// first (reserve: the guarded UPDATE; release and expiry: SELECT … FOR NO KEY UPDATE). Confirm
// locks only its redemption row.
package store

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"vouchergate/migrations"
)

// Store implements voucher.Store on a pgx pool.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Open connects a pool to url; maxConns 0 keeps pgx's default.
func Open(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	return OpenTraced(ctx, url, maxConns, 0, nil)
}

// OpenTraced is Open keeping at least minConns connections open (Warm readies them and, with
// minConns above 0, the pool readies those it opens later as they open) and telling every
// query's start and end to tracer (nil: none).
func OpenTraced(ctx context.Context, url string, maxConns, minConns int32, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("VG_DATABASE_URL is invalid; expected postgres://user@host:port/db: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	cfg.MinConns = min(minConns, cfg.MaxConns)
	cfg.ConnConfig.Tracer = tracer
	if minConns > 0 {
		cfg.AfterConnect = readyNewConn
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	return pool, nil
}

// Migrate applies the embedded migrations. goose holds a PostgreSQL advisory lock for the
// session, so backends starting at once apply each migration once.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	return migrate(ctx, db, migrations.FS)
}

func migrate(ctx context.Context, db *sql.DB, fsys fs.FS) error {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return fmt.Errorf("migrate: create lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: apply: %w", err)
	}
	return nil
}
