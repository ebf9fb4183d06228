-- +goose Up
-- A shopper's orderId is stored in the shopper's own scope, "<customerId>/<orderId>", so that
-- an orderId one shopper reserves never takes, blocks or answers another customer's: up to
-- 64 + 1 + 64 bytes. NOT VALID then VALIDATE checks the rows already there without holding the
-- table's writers for the scan.
ALTER TABLE redemptions DROP CONSTRAINT redemptions_order_id_check;
ALTER TABLE redemptions ADD CONSTRAINT redemptions_order_id_check
    CHECK (octet_length(order_id) BETWEEN 1 AND 129) NOT VALID;
ALTER TABLE redemptions VALIDATE CONSTRAINT redemptions_order_id_check;

-- +goose Down
ALTER TABLE redemptions DROP CONSTRAINT redemptions_order_id_check;
ALTER TABLE redemptions ADD CONSTRAINT redemptions_order_id_check
    CHECK (octet_length(order_id) BETWEEN 1 AND 64) NOT VALID;
