-- Plugin functions: page views per minute and funnel step, bots left out (funnel_step and is_bot come from
-- the sql-functions plugin package).
SELECT window(event_time, '1 minute') AS window,
       funnel_step(path, '/,/product,/cart,/checkout') AS step,
       count(*) AS views
FROM page_view
WHERE NOT is_bot(user_agent)
GROUP BY window(event_time, '1 minute'), funnel_step(path, '/,/product,/cart,/checkout')
