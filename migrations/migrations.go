// Package migrations embeds the SQL schema migrations, applied by goose at backend start.
package migrations

import "embed"

// FS holds the migration files, named NNNNN_what.sql. Another issue's tables get the next number.
//
//go:embed *.sql
var FS embed.FS
