"""The cluster profile of the local stack (`make up TOPOLOGY=cluster`): 3 brokers, 2 registries, N gateways, HAProxy."""
