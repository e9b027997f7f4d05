"""Images and sounds in requests: `media` (data URIs and parts checked), `media_headers` and
`sound_headers` (size and format read from the bytes before decoding), `image_scaling` (huge
images scaled with bounded memory), `media_parts` (a conversation's media in prompt order),
`local_media` (--media-path files), `remote_media` (--remoteimages fetches) and
`pinned_fetch` (a URL fetched with every hop and address checked).

May import: `server.dialects.edge`, the core, `server.base`, httpx, Pillow.
"""
