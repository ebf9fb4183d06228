package store

// RedemptionPageQuery is the statement of RedemptionPage, for the test that reads its plan.
var RedemptionPageQuery = redemptionPageQuery

// HotStatements are the statements Warm prepares.
func HotStatements() []string { return hotStatements }
