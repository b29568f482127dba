"""What the benchmark scripts share: where the project's binary and Python are and the
environment every job runs in (env), the one lab runner (lab), alternated rounds and their
medians (rounds), tables, CSV and plots (report), the host's CPU accounting (host), the
jobs' commands (jobs) and the timed training loop of the rank-side scripts (torch_loop).
A script in bench/<topic>/ puts bench/ on sys.path and imports from here."""
