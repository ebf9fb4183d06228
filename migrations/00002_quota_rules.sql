-- +goose Up
-- Purchase quota rules: for business line biz_id and identity type identity_type, at most
-- quota_limit per window for items of dimension (exact "ITEM:1001", "ITEM:*" for each item
-- counted on its own, or "*" for every item together). One rule per (biz, type, dimension,
-- window): a second POST changes the limit and keeps the counters.
CREATE TABLE quota_rules (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    biz_id        bigint      NOT NULL CHECK (biz_id > 0),
    identity_type text        NOT NULL CHECK (identity_type ~ '^[A-Z0-9_]{1,32}$'),
    dimension     text        NOT NULL CHECK (octet_length(dimension) BETWEEN 1 AND 64),
    quota_limit   bigint      NOT NULL CHECK (quota_limit BETWEEN 0 AND 1000000000000000),
    window_type   text        NOT NULL CHECK (window_type IN ('DAY', 'WEEK', 'MONTH', 'ROLLING', 'FIXED')),
    timezone      text,
    rolling_ms    bigint,
    fixed_start   timestamptz,
    fixed_end     timestamptz,
    -- the window in one canonical string ("DAY/Asia/Shanghai", "ROLLING/86400000", ...), part
    -- of the counters' key names
    window_id     text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT quota_rules_one_per_window UNIQUE (biz_id, identity_type, dimension, window_id),
    CONSTRAINT calendar_has_timezone CHECK (
        window_type NOT IN ('DAY', 'WEEK', 'MONTH') OR timezone IS NOT NULL),
    CONSTRAINT rolling_has_size CHECK (window_type <> 'ROLLING' OR rolling_ms > 0),
    CONSTRAINT fixed_has_period CHECK (
        window_type <> 'FIXED' OR (fixed_start IS NOT NULL AND fixed_end > fixed_start))
);

-- +goose Down
DROP TABLE quota_rules;
