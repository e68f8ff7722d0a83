"""Reports: rich tables, summaries (fast_p, win rate, SOL score), matplotlib figures."""
