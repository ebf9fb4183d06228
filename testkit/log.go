package testkit

import "log/slog"

// QuietLog is a logger that writes nothing, for the parts a test builds whose warnings (a dead
// server dialled on purpose) would only bury the test's own output.
var QuietLog = slog.New(slog.DiscardHandler)
