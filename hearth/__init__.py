"""The `hearth` command, above the server and the launcher: it opens the launcher (app/) or
serves (server/), so that neither has to import the other. See hearth/__main__.py."""
