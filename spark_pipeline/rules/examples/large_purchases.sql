-- Routing: a stream of the large purchases (every column of the purchase view), keyed by event_id.
SELECT * FROM purchase WHERE total > 1000
