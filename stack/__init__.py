"""Local development stack: set-up of JVM parts and start/stop of Kafka and Headwater services on loopback."""
