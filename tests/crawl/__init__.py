"""Crawling (services/crawl/, fetchers, net): jobs, the frontier, politeness, the crawl tool."""
