-- +goose Up
-- opened says an order of the voucher may exist although its start is still ahead: an edit
-- found it already open (and may have moved its start later). Before the start of a voucher not
-- opened no order can exist, so the crowd waiting for a sale to open costs no order lookup.
-- Vouchers edited before this column existed are taken as opened, as the lookup treated them.
ALTER TABLE vouchers ADD COLUMN opened boolean NOT NULL DEFAULT false;
UPDATE vouchers SET opened = true WHERE revision > 1 OR starts_at <= now();

-- +goose Down
ALTER TABLE vouchers DROP COLUMN opened;
