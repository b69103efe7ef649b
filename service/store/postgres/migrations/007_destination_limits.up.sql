-- Destinations' rate and in-flight limits, held for every instance sharing
-- the schema (store.Limits; the rules are package limits'). Times are the
-- callers' (LimitParams.Now), never the server's; durations arrive in
-- whole microseconds.
--
-- The tables are UNLOGGED: every attempt to a limited destination writes
-- them, and a write that makes no WAL commits without waiting for a flush.
-- What that gives up is soft state: after a crash of the server the tables
-- are empty (and a standby has them empty), so each destination may burst
-- once and the attempts in flight then are not counted.

-- A key's rate state and the count of its slots, and, whatever its limits,
-- the row each call on the key locks first: calls on one key take turns,
-- those on others do not wait. tat is the theoretical arrival time,
-- ticket the last place in line given to a refused call, in_flight the
-- number of rows the key has in retry_limit_slots. A row stays when its
-- key is idle: there is one per destination.
CREATE UNLOGGED TABLE retry_limit_rates (
    key       text COLLATE "C" PRIMARY KEY,
    tat       timestamptz      NOT NULL DEFAULT '-infinity',
    ticket    timestamptz      NOT NULL DEFAULT '-infinity',
    in_flight integer          NOT NULL DEFAULT 0
);

-- The slots granted and not released: a slot counts until expires_at.
-- The primary key finds a release's slot; the index on expiry finds the
-- expired slots of a key, which each call on it deletes, without reading
-- the live ones (a cap may be many thousands).
CREATE UNLOGGED TABLE retry_limit_slots (
    key        text COLLATE "C" NOT NULL,
    slot       text COLLATE "C" NOT NULL,
    expires_at timestamptz      NOT NULL,
    PRIMARY KEY (key, slot)
);
CREATE INDEX retry_limit_slots_expiry ON retry_limit_slots (key, expires_at);

-- retry_limit_acquire asks for room for one attempt on key at now: a rate
-- token (interval > 0) and a slot (max_in_flight > 0), both or neither.
-- It returns o_ok and o_at, the token's time when granted or the place in
-- line when refused by the rate (o_reason 1); o_reason 2 is a refusal for
-- room in flight. One call is one round trip; the key's row, locked first, makes
-- concurrent calls on the key take turns, and each statement below reads
-- what the calls before it committed.
CREATE FUNCTION retry_limit_acquire(p_key text, p_now timestamptz, p_interval bigint, p_tau bigint,
    p_max_wait bigint, p_max_in_flight integer, p_hold bigint, p_slot text,
    OUT o_ok boolean, OUT o_at timestamptz, OUT o_reason smallint)
LANGUAGE plpgsql AS $$
DECLARE
    us        CONSTANT interval := interval '1 microsecond';
    v_tat     timestamptz;
    v_ticket  timestamptz;
    v_flight  integer;
    v_expired integer;
BEGIN
    SELECT r.tat, r.ticket, r.in_flight INTO v_tat, v_ticket, v_flight
    FROM retry_limit_rates r WHERE r.key = p_key FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO retry_limit_rates (key) VALUES (p_key) ON CONFLICT DO NOTHING;
        SELECT r.tat, r.ticket, r.in_flight INTO v_tat, v_ticket, v_flight
        FROM retry_limit_rates r WHERE r.key = p_key FOR UPDATE;
    END IF;
    o_ok := false;
    o_reason := 0;
    o_at := p_now;
    IF p_interval > 0 THEN
        v_tat := greatest(v_tat, p_now);
        IF v_tat - p_tau * us - p_now > p_max_wait * us THEN
            v_ticket := greatest(v_ticket, v_tat - p_tau * us, p_now) + p_interval * us;
            UPDATE retry_limit_rates r SET ticket = v_ticket WHERE r.key = p_key;
            o_at := v_ticket;
            o_reason := 1;
            RETURN;
        END IF;
        o_at := greatest(v_tat - p_tau * us, p_now);
        v_tat := v_tat + p_interval * us;
    END IF;
    IF p_max_in_flight > 0 THEN
        DELETE FROM retry_limit_slots s WHERE s.key = p_key AND s.expires_at <= p_now;
        GET DIAGNOSTICS v_expired = ROW_COUNT;
        v_flight := v_flight - v_expired;
        IF v_flight >= p_max_in_flight THEN
            IF v_expired > 0 THEN
                UPDATE retry_limit_rates r SET in_flight = v_flight WHERE r.key = p_key;
            END IF;
            o_reason := 2;
            RETURN;
        END IF;
        INSERT INTO retry_limit_slots (key, slot, expires_at) VALUES (p_key, p_slot, p_now + p_hold * us);
        v_flight := v_flight + 1;
    END IF;
    IF p_interval > 0 OR p_max_in_flight > 0 THEN
        UPDATE retry_limit_rates r SET tat = CASE WHEN p_interval > 0 THEN v_tat ELSE r.tat END, in_flight = v_flight
        WHERE r.key = p_key;
    END IF;
    o_ok := true;
END
$$;

-- retry_limit_release frees a slot, if it is still held. It locks the
-- key's row before the slot's, in the order retry_limit_acquire takes
-- them, so that the two never wait for each other in a circle.
CREATE FUNCTION retry_limit_release(p_key text, p_slot text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM retry_limit_rates r WHERE r.key = p_key FOR UPDATE;
    DELETE FROM retry_limit_slots s WHERE s.key = p_key AND s.slot = p_slot;
    IF FOUND THEN
        UPDATE retry_limit_rates r SET in_flight = r.in_flight - 1 WHERE r.key = p_key;
    END IF;
END
$$;
