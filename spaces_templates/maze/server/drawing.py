"""The maze grid drawn as a PNG with Pillow."""

import io

from PIL import Image, ImageDraw

from server.maze import AGENT, EXIT, WALL

SQUARE_PX = 16
BACKGROUND = (244, 241, 232)
COLOURS = {WALL: (38, 42, 56), EXIT: (46, 160, 90), AGENT: (52, 101, 214)}


def image_size(rows: list[str]) -> tuple[int, int]:
    return (len(rows[0]) * SQUARE_PX, len(rows) * SQUARE_PX)


def draw_png(rows: list[str]) -> bytes:
    """Walls as dark squares, the exit as a green square, the agent as a blue disc."""
    image = Image.new("RGB", image_size(rows), BACKGROUND)
    pen = ImageDraw.Draw(image)
    for row, line in enumerate(rows):
        for col, symbol in enumerate(line):
            box = (col * SQUARE_PX, row * SQUARE_PX, (col + 1) * SQUARE_PX - 1, (row + 1) * SQUARE_PX - 1)
            if symbol == AGENT:
                inset = SQUARE_PX // 8
                pen.ellipse((box[0] + inset, box[1] + inset, box[2] - inset, box[3] - inset), fill=COLOURS[AGENT])
            elif symbol in COLOURS:
                pen.rectangle(box, fill=COLOURS[symbol])
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()
