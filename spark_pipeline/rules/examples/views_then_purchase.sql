-- Page views joined to the same user's purchases within 30 minutes after the view.
-- Both sides are bounded in event time, so Spark keeps 30 minutes (plus the lateness) of state.
SELECT v.event_id AS view_event_id,
       p.event_id AS purchase_event_id,
       v.user_id,
       v.path,
       p.order_id,
       p.total,
       p.currency,
       v.event_time AS viewed_at,
       p.event_time AS purchased_at
FROM page_view v
JOIN purchase p
  ON v.user_id = p.user_id
 AND p.event_time BETWEEN v.event_time AND v.event_time + INTERVAL 30 MINUTES
