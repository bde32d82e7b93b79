"""A request's way through the node: dispatch (``api_key -> handler`` table), quota
recording and throttling, request metrics."""
