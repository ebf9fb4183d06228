-- +goose Up
-- Vouchers and their redemptions. The database alone makes over-allocation impossible:
-- used_count can never pass total_limit, an orderId redeems once ever, and a customer's active
-- redemptions each take one of per_user_limit numbered slots.
CREATE TABLE vouchers (
    code             text        PRIMARY KEY CHECK (code ~ '^[A-Z0-9_-]{1,32}$'),
    discount_amount  bigint      NOT NULL CHECK (discount_amount >= 0),
    min_order_amount bigint      NOT NULL DEFAULT 0 CHECK (min_order_amount >= 0),
    total_limit      integer     NOT NULL CHECK (total_limit >= 0),
    used_count       integer     NOT NULL DEFAULT 0 CHECK (used_count >= 0),
    per_user_limit   integer     NOT NULL DEFAULT 1 CHECK (per_user_limit >= 1),
    starts_at        timestamptz NOT NULL,
    ends_at          timestamptz NOT NULL,
    flash_sale       boolean     NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT used_within_limit CHECK (used_count <= total_limit),
    CONSTRAINT ends_after_start CHECK (ends_at > starts_at),
    -- the target of redemptions' foreign key, so a slot can be checked against the limit
    CONSTRAINT vouchers_code_per_user_limit UNIQUE (code, per_user_limit)
);

CREATE TABLE redemptions (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    voucher_code    text        NOT NULL,
    per_user_limit  integer     NOT NULL,
    customer_id     text        NOT NULL CHECK (octet_length(customer_id) BETWEEN 1 AND 64),
    order_id        text        NOT NULL UNIQUE CHECK (octet_length(order_id) BETWEEN 1 AND 64),
    -- which of the customer's per_user_limit uses this is; unique among active rows (below)
    slot            integer     NOT NULL,
    status          text        NOT NULL CHECK (status IN ('RESERVED', 'CONFIRMED', 'RELEASED')),
    order_amount    bigint      NOT NULL CHECK (order_amount >= 0),
    discount_amount bigint      NOT NULL CHECK (discount_amount >= 0),
    reserved_at     timestamptz NOT NULL,
    hold_expires_at timestamptz NOT NULL,
    confirmed_at    timestamptz,
    released_at     timestamptz,
    FOREIGN KEY (voucher_code, per_user_limit)
        REFERENCES vouchers (code, per_user_limit) ON UPDATE CASCADE,
    CONSTRAINT slot_within_limit CHECK (slot BETWEEN 1 AND per_user_limit),
    CONSTRAINT confirmed_has_time CHECK (status <> 'CONFIRMED' OR confirmed_at IS NOT NULL),
    CONSTRAINT released_has_time CHECK (status <> 'RELEASED' OR released_at IS NOT NULL)
);

-- D2 by construction: a customer's active redemptions of a voucher take distinct slots, and
-- there are per_user_limit slots. A released row frees its slot, so the customer may come back.
CREATE UNIQUE INDEX redemptions_active_customer_slot
    ON redemptions (voucher_code, customer_id, slot)
    WHERE status IN ('RESERVED', 'CONFIRMED');

CREATE INDEX redemptions_voucher_status ON redemptions (voucher_code, status);

-- the expiry job's scan
CREATE INDEX redemptions_hold_expiry ON redemptions (hold_expires_at) WHERE status = 'RESERVED';

-- +goose Down
DROP TABLE redemptions;
DROP TABLE vouchers;
