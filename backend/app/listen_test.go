package app_test

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/config"
)

// The backend command run by itself on a port another process holds stops with exit status 1,
// naming the variable and the address, before it migrates its (fresh) database or says it is
// listening; for the ops listener's port as for the API's.
func TestBackendOnATakenPortStopsBeforeMigrating(t *testing.T) {
	for _, name := range []string{"VG_BACKEND_ADDR", "VG_BACKEND_OPS_ADDR"} {
		t.Run(name, func(t *testing.T) {
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			cfg := backendtest.Config(t)
			addrs := map[string]string{"VG_BACKEND_ADDR": "127.0.0.1:0", "VG_BACKEND_OPS_ADDR": "127.0.0.1:0"} // any free port
			addrs[name] = taken.Addr().String()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, backendtest.Binary(t))
			cmd.Env = append(config.EnvironWithoutVG(), "VG_DATABASE_URL="+cfg.DatabaseURL, "VG_REDIS_URL="+cfg.RedisURL,
				"VG_REDIS_PREFIX="+cfg.RedisPrefix, "VG_NATS_URL="+cfg.NATSURL, "VG_NATS_PREFIX="+cfg.NATSPrefix,
				"VG_ADMIN_TOKEN="+backendtest.Token,
				"VG_BACKEND_ADDR="+addrs["VG_BACKEND_ADDR"], "VG_BACKEND_OPS_ADDR="+addrs["VG_BACKEND_OPS_ADDR"])
			out, _ := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("the backend with %s taken still ran after a minute:\n%s", name, out)
			}
			want := name + "=" + taken.Addr().String()
			if status := cmd.ProcessState.ExitCode(); status != 1 || !strings.Contains(string(out), want) ||
				!strings.Contains(string(out), "address already in use") {
				t.Errorf("the backend with %s taken: exit %d, output:\n%s\nwant exit 1 naming %s and the address in use", name, status, out, want)
			}
			if strings.Contains(string(out), "backend listening") {
				t.Errorf("the backend said it was listening on a port it could not take:\n%s", out)
			}
			if tables := tablesOf(t, cfg.DatabaseURL); len(tables) > 0 {
				t.Errorf("the backend migrated its database before finding %s taken: tables %v", name, tables)
			}
		})
	}
}

// tablesOf lists the tables of the database at url's public schema.
func tablesOf(t *testing.T, url string) []string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), `SELECT tablename FROM pg_tables WHERE schemaname = 'public'`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return tables
}
