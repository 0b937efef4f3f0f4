package shapes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

class ShapesTest {
    @Test
    void area() {
        assertEquals(12, Shapes.rectangleArea(3, 4));
    }

    @Test
    void areaRefusesNegativeSides() {
        assertThrows(IllegalArgumentException.class, () -> Shapes.rectangleArea(-1, 4));
    }

    @Test
    void areaOverflowIsAnError() {
        assertThrows(ArithmeticException.class, () -> Shapes.rectangleArea(Long.MAX_VALUE, 2));
    }

    @Test
    void perimeter() {
        assertEquals(14, Shapes.rectanglePerimeter(3, 4));
    }

    @Test
    void triangles() {
        assertTrue(Shapes.isTriangle(3, 4, 5));
        assertFalse(Shapes.isTriangle(1, 2, 3));
    }

    @Test
    void box() {
        assertEquals(List.of("###", "# #", "###"), Shapes.box(3, 3));
    }

    /** A scratch file in the system's temporary directory, as many tests write one. */
    @Test
    void scratchFileInTmp() throws IOException {
        Path p = Files.createTempFile("shapes-", ".txt");
        try {
            Files.writeString(p, String.join("\n", Shapes.box(2, 2)));
            assertEquals("##\n##", Files.readString(p));
        } finally {
            Files.delete(p);
        }
    }
}
