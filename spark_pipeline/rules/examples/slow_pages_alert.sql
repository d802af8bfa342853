-- Threshold alert stream: a row per region and minute whose average page load time passes 2 seconds.
SELECT window(event_time, '1 minute') AS window,
       region,
       count(*) AS views,
       avg(load_time_ms) AS avg_load_ms
FROM page_view
GROUP BY window(event_time, '1 minute'), region
HAVING avg(load_time_ms) > 2000
