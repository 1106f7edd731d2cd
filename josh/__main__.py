from josh.cli.main import app

app()
