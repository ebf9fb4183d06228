package store

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"vouchergate/backend/voucher"
)

const (
	uniqueViolation  = "23505"
	notNullViolation = "23502"
)

func isNotNull(err error, column string) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == notNullViolation && pg.ColumnName == column
}

func isUnique(err error, constraint string) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == uniqueViolation && (constraint == "" || pg.ConstraintName == constraint)
}

// failed wraps an infrastructure error with what was being done, marking it
// voucher.ErrNotWritten when nothing can have been committed: the server refused a statement
// (the transaction is rolled back), or the request never left (no connection).
//
// pgconn.SafeToRetry alone is not enough: a connection that breaks while the answer is awaited
// is closed by the reader, and the next read reports "conn closed" as safe to retry although
// the statement went out and may have committed. So ErrConnClosed counts as unknown (at worst a
// use stays held for the reconciler).
func failed(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
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
