package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// RedemptionPageQuery is the statement of RedemptionPage, for the test that reads its plan.
var RedemptionPageQuery = redemptionPageQuery

// HotStatements are the statements Warm prepares.
func HotStatements() []string { return hotStatements }

// WriteBatchSQL is the flash batch's guarded insert, one of the hot statements.
const WriteBatchSQL = writeBatchSQL

// PlannedRuns is how often Warm runs each hot statement.
const PlannedRuns = plannedRuns

// ReadyConn readies c as Warm does, without the rehearsal unless rehearse.
func ReadyConn(ctx context.Context, c *pgx.Conn, rehearse bool) error {
	if rehearse {
		return prepareHot(ctx, c)
	}
	return prepareStatements(ctx, c)
}
