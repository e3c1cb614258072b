"""Compatibility entry point: crawling lives in services/crawl/ (runner, frontier, page_crawl, ...)."""

from services.crawl.runner import CrawlRunner, run_job, wait_any

__all__ = ["CrawlRunner", "run_job", "wait_any"]
