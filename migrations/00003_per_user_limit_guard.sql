-- +goose Up
-- The guard that a redemption's per_user_limit is its voucher's (so slot_within_limit holds
-- the voucher's real limit, D2) checked once per statement instead of once per row. The foreign
-- key did it with one lookup and one row lock of the voucher per inserted row, a third of a
-- flash batch's time (issue 8); this checks all of a statement's rows in one query, and locks
-- each voucher they name once (KEY SHARE, as the foreign key did), so it cannot change under them.
ALTER TABLE redemptions DROP CONSTRAINT redemptions_voucher_code_per_user_limit_fkey;

-- +goose StatementBegin
CREATE FUNCTION redemptions_match_voucher() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad text;
BEGIN
    PERFORM 1 FROM vouchers v
        WHERE v.code IN (SELECT DISTINCT voucher_code FROM written)
        FOR KEY SHARE OF v;
    SELECT w.voucher_code INTO bad FROM written w
        LEFT JOIN vouchers v ON v.code = w.voucher_code AND v.per_user_limit = w.per_user_limit
        WHERE v.code IS NULL LIMIT 1;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'redemption of voucher % does not match a voucher and its per_user_limit', bad
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'redemptions_match_voucher';
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER redemptions_match_voucher AFTER INSERT ON redemptions
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION redemptions_match_voucher();

-- Nothing but the carry below changes these columns; a row at a time is enough for it.
-- +goose StatementBegin
CREATE FUNCTION redemption_matches_voucher() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM vouchers WHERE code = NEW.voucher_code AND per_user_limit = NEW.per_user_limit
        FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'redemption of voucher % does not match a voucher and its per_user_limit', NEW.voucher_code
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'redemptions_match_voucher';
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER redemption_matches_voucher AFTER UPDATE OF voucher_code, per_user_limit ON redemptions
    FOR EACH ROW EXECUTE FUNCTION redemption_matches_voucher();

-- What the foreign key did on the voucher's side: a voucher with redemptions keeps its code, and
-- a change of its per_user_limit is carried to them (where a slot no longer fits, refused).
-- +goose StatementBegin
CREATE FUNCTION vouchers_carry_per_user_limit() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE TRIGGER vouchers_carry_per_user_limit AFTER UPDATE OF code, per_user_limit OR DELETE ON vouchers
    FOR EACH ROW EXECUTE FUNCTION vouchers_carry_per_user_limit();

-- +goose Down
DROP TRIGGER vouchers_carry_per_user_limit ON vouchers;
DROP FUNCTION vouchers_carry_per_user_limit();
DROP TRIGGER redemption_matches_voucher ON redemptions;
DROP FUNCTION redemption_matches_voucher();
DROP TRIGGER redemptions_match_voucher ON redemptions;
DROP FUNCTION redemptions_match_voucher();
ALTER TABLE redemptions ADD FOREIGN KEY (voucher_code, per_user_limit)
    REFERENCES vouchers (code, per_user_limit) ON UPDATE CASCADE;
