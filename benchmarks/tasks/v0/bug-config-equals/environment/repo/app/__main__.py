from app.config import load

for key, value in sorted(load("settings.conf").items()):
    print(f"{key} = {value}")
