from josh.cli import app

app()
