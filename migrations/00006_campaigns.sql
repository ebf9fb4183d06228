-- +goose Up
-- A voucher changes while it runs: paused and resumed, its discount, limits, period and hold
-- time edited, a confirmed order refunded, a voucher never redeemed deleted.
--
-- revision counts the voucher's edits: every change raises it by one in the transaction that
-- makes it, so a copy of the voucher (a backend's cache, the Redis gate's) names the edit it
-- holds and the newer of two copies is the one with the higher revision.
ALTER TABLE vouchers
    ADD COLUMN active              boolean NOT NULL DEFAULT true,
    ADD COLUMN discount_percent    integer CHECK (discount_percent BETWEEN 1 AND 100),
    ADD COLUMN max_discount_amount bigint  CHECK (max_discount_amount >= 0),
    ADD COLUMN hold_ttl_ms         bigint  CHECK (hold_ttl_ms BETWEEN 1000 AND 86400000),
    ADD COLUMN revision            bigint  NOT NULL DEFAULT 1 CHECK (revision >= 1),
    -- a percentage voucher has no fixed amount, and only a percentage has a cap
    ADD CONSTRAINT one_kind_of_discount CHECK (discount_percent IS NULL OR discount_amount = 0),
    ADD CONSTRAINT cap_needs_percent CHECK (max_discount_amount IS NULL OR discount_percent IS NOT NULL);

-- Every edit, with what it changed: before and after hold the changed fields only, by the names
-- of the admin API.
CREATE TABLE voucher_changes (
    voucher_code text        NOT NULL REFERENCES vouchers (code) ON DELETE CASCADE,
    revision     bigint      NOT NULL,
    changed_at   timestamptz NOT NULL,
    before       jsonb       NOT NULL,
    after        jsonb       NOT NULL,
    PRIMARY KEY (voucher_code, revision)
);

-- A refund gives a confirmed order's use back: REFUNDED is not active, so it leaves used_count
-- and frees the customer's slot, as RELEASED does.
ALTER TABLE redemptions ADD COLUMN refunded_at timestamptz;
ALTER TABLE redemptions DROP CONSTRAINT redemptions_status_check;
ALTER TABLE redemptions ADD CONSTRAINT redemptions_status_check
    CHECK (status IN ('RESERVED', 'CONFIRMED', 'RELEASED', 'REFUNDED')) NOT VALID;
ALTER TABLE redemptions VALIDATE CONSTRAINT redemptions_status_check;
ALTER TABLE redemptions ADD CONSTRAINT refunded_has_time
    CHECK (status <> 'REFUNDED' OR refunded_at IS NOT NULL) NOT VALID;
ALTER TABLE redemptions VALIDATE CONSTRAINT refunded_has_time;

-- A change of per_user_limit is no longer carried to the redemptions: each row keeps the limit
-- it was written under (its slot fits it), so lowering the limit below what a customer holds
-- keeps their holds, and the writes refuse more by counting the customer's active rows against
-- the voucher's limit. Carrying it would also rewrite every row of a large voucher. A voucher
-- with redemptions still keeps its code and cannot be deleted.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION vouchers_carry_per_user_limit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (TG_OP = 'DELETE' OR NEW.code <> OLD.code)
        AND EXISTS (SELECT 1 FROM redemptions WHERE voucher_code = OLD.code) THEN
        RAISE EXCEPTION 'voucher % has redemptions', OLD.code
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'redemptions_match_voucher';
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION vouchers_carry_per_user_limit() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    gone boolean := TG_OP = 'DELETE';
BEGIN
    IF NOT gone THEN
        gone := NEW.code <> OLD.code;
    END IF;
    IF gone THEN
        IF EXISTS (SELECT 1 FROM redemptions WHERE voucher_code = OLD.code) THEN
            RAISE EXCEPTION 'voucher % has redemptions', OLD.code
                USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'redemptions_match_voucher';
        END IF;
    ELSIF NEW.per_user_limit <> OLD.per_user_limit THEN
        UPDATE redemptions SET per_user_limit = NEW.per_user_limit WHERE voucher_code = OLD.code;
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
ALTER TABLE redemptions DROP CONSTRAINT refunded_has_time;
ALTER TABLE redemptions DROP CONSTRAINT redemptions_status_check;
UPDATE redemptions SET status = 'RELEASED', released_at = refunded_at WHERE status = 'REFUNDED';
ALTER TABLE redemptions ADD CONSTRAINT redemptions_status_check
    CHECK (status IN ('RESERVED', 'CONFIRMED', 'RELEASED'));
ALTER TABLE redemptions DROP COLUMN refunded_at;
DROP TABLE voucher_changes;
ALTER TABLE vouchers
    DROP CONSTRAINT cap_needs_percent,
    DROP CONSTRAINT one_kind_of_discount,
    DROP COLUMN revision,
    DROP COLUMN hold_ttl_ms,
    DROP COLUMN max_discount_amount,
    DROP COLUMN discount_percent,
    DROP COLUMN active;
