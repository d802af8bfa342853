-- Sessions: events and duration per browser session, a session ending after 30 minutes without events.
-- A session is emitted once the watermark passes its end (append mode).
SELECT session_window(event_time, '30 minutes') AS session,
       session_id,
       count(*) AS events,
       (unix_millis(max(event_time)) - unix_millis(min(event_time))) / 1000.0 AS duration_s
FROM page_view
GROUP BY session_window(event_time, '30 minutes'), session_id
