package store

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"vouchergate/backend/voucher"
)

const (
	uniqueViolation     = "23505"
	notNullViolation    = "23502"
	foreignKeyViolation = "23503"
)

func isForeignKey(err error, constraint string) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == foreignKeyViolation && pg.ConstraintName == constraint
}

func isNotNull(err error, column string) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == notNullViolation && pg.ColumnName == column
}

func isUnique(err error, constraint string) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == uniqueViolation && (constraint == "" || pg.ConstraintName == constraint)
}

// failed wraps an infrastructure error met before the server could commit with what was being
// done, marking it voucher.ErrNotWritten when nothing can have been committed: the server
// refused a statement (the transaction is rolled back), or the request never left (no
// connection). An error at or after the commit is outcomeUnknown's, whatever its kind: a
// classification is only as good as the moment it is made.
//
// pgconn.SafeToRetry alone is not enough: a connection that breaks while the answer is awaited
// is closed by the reader, and the next read reports "conn closed" as safe to retry although
// the statement went out and may have committed. So ErrConnClosed counts as unknown (at worst a
// use stays held for the reconciler).
func failed(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	var during *committing
	if errors.As(err, &during) {
		return fmt.Errorf("%s: %w", what, err)
	}
	var pg *pgconn.PgError
	var conn *pgconn.ConnectError
	if errors.As(err, &pg) || errors.As(err, &conn) || (pgconn.SafeToRetry(err) && !errors.Is(err, pgconn.ErrConnClosed)) {
		return fmt.Errorf("%s: %w: %w", what, voucher.ErrNotWritten, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// notWritten wraps an error met before COMMIT was sent: nothing can have been committed.
func notWritten(err error, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %w", fmt.Sprintf(format, args...), voucher.ErrNotWritten, err)
}

// outcomeUnknown wraps an error met while the server may have been committing (in COMMIT's
// answer, or the Sync that ends an implicit transaction): even a PostgreSQL error then (57P01,
// the server terminating the connection) may come after the commit was made durable.
func outcomeUnknown(err error, format string, args ...any) error {
	return fmt.Errorf("%s: outcome unknown: %w", fmt.Sprintf(format, args...), &committing{err})
}

// committing marks an error outcomeUnknown wrapped, so failed leaves it unknown.
type committing struct{ err error }

func (c *committing) Error() string { return c.err.Error() }
func (c *committing) Unwrap() error { return c.err }
