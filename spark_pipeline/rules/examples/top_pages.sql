-- Top pages per minute and region: views per path in each 1-minute window, updated as the minute fills.
-- Output keyed by (window, region, path); rank them in the consumer (or in a dashboard) per window.
SELECT window(event_time, '1 minute') AS window,
       region,
       path,
       count(*) AS views,
       approx_count_distinct(session_id) AS sessions
FROM page_view
GROUP BY window(event_time, '1 minute'), region, path
