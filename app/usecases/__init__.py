"""What a click, a call or a command sets going, apart from the routes, pages and commands that ask for it:
play sessions, evaluations, quality reports and rounds, deploying envhub as a Space."""
