-- +goose Up
-- A shopper's orderId is stored in the shopper's own scope, "<customerId>/<orderId>", so that
-- an orderId one shopper reserves never takes, blocks or answers another customer's: up to
-- 64 + 1 + 64 bytes. goose runs this file in one transaction, so the ACCESS EXCLUSIVE lock that
-- DROP and ADD CONSTRAINT take is held through VALIDATE's scan of the rows already there: reads
-- and writes of redemptions wait for the scan (NOT VALID saves nothing here). The scan reads
-- every row once; on a large table apply it when no sale is running.
ALTER TABLE redemptions DROP CONSTRAINT redemptions_order_id_check;
ALTER TABLE redemptions ADD CONSTRAINT redemptions_order_id_check
    CHECK (octet_length(order_id) BETWEEN 1 AND 129) NOT VALID;
ALTER TABLE redemptions VALIDATE CONSTRAINT redemptions_order_id_check;

-- +goose Down
ALTER TABLE redemptions DROP CONSTRAINT redemptions_order_id_check;
ALTER TABLE redemptions ADD CONSTRAINT redemptions_order_id_check
    CHECK (octet_length(order_id) BETWEEN 1 AND 64) NOT VALID;
