-- +goose Up
-- Quotas as platform teams run them.
--
-- A rule's mode: ENFORCE refuses a deduct that has no room; SHADOW counts like any other rule
-- but never refuses (the answer lists it in wouldExceed), so a new limit can be tried on live
-- traffic before it is enforced. Its counters are the ones an ENFORCE rule of the same
-- dimension and window would use, so switching the mode keeps what was counted.
ALTER TABLE quota_rules ADD COLUMN mode text NOT NULL DEFAULT 'ENFORCE'
    CHECK (mode IN ('ENFORCE', 'SHADOW'));

-- An override replaces one rule's limit for one identity (a VIP allowed more, a fraudster
-- blocked with 0), until expires_at if given. It goes with its rule.
CREATE TABLE quota_overrides (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    rule_id     bigint      NOT NULL REFERENCES quota_rules (id) ON DELETE CASCADE,
    identity    text        NOT NULL CHECK (octet_length(identity) BETWEEN 1 AND 64),
    quota_limit bigint      NOT NULL CHECK (quota_limit BETWEEN 0 AND 1000000000000000),
    expires_at  timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT quota_overrides_one_per_identity UNIQUE (rule_id, identity)
);

-- A reset of an identity's counters (support ticket): what it asked and what it cleared.
-- outcome is UNKNOWN from the moment the row is written until the Redis reset answered, then
-- DONE with what it cleared; a row left UNKNOWN is a reset that may or may not have run.
CREATE TABLE quota_resets (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    biz_id        bigint      NOT NULL CHECK (biz_id > 0),
    identity_type text        NOT NULL CHECK (identity_type ~ '^[A-Z0-9_]{1,32}$'),
    identity      text        NOT NULL CHECK (octet_length(identity) BETWEEN 1 AND 64),
    dimension     text        CHECK (octet_length(dimension) BETWEEN 1 AND 64),
    reset_at      timestamptz NOT NULL,
    outcome       text        NOT NULL CHECK (outcome IN ('UNKNOWN', 'DONE')),
    cleared       jsonb
);
CREATE INDEX quota_resets_by_identity ON quota_resets (biz_id, identity_type, identity, id);

-- What a business line's deducts do when Redis cannot be reached: CLOSED answers 503 (the
-- default, for a business line with no row), OPEN answers 200 "degraded" and counts nothing.
CREATE TABLE quota_biz_settings (
    biz_id           bigint      PRIMARY KEY CHECK (biz_id > 0),
    when_unavailable text        NOT NULL CHECK (when_unavailable IN ('CLOSED', 'OPEN')),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE quota_biz_settings;
DROP TABLE quota_resets;
DROP TABLE quota_overrides;
ALTER TABLE quota_rules DROP COLUMN mode;
