-- What a look of Listen reads first, in one statement: the heads
-- (listen_heads_cols). Listen reads the rows of a part only when its
-- figure moved.
SELECT {{listen_heads_cols}}
